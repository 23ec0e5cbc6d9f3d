"""Parsers of perftest (text table, --out_json, --help) and OSU micro-benchmark tables."""
import os
import re

import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure import perftest as pt

FIX = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "rdma")


def read(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as handle:
        return handle.read()


def test_osu_bw_article_table():
    table = pt.parse_osu(read("osu_bw_host_fdr_article.txt"))
    assert table["title"] == "OSU MPI Bandwidth Test v5.4.3"
    assert table["column"] == "Bandwidth" and table["unit"] == "MB/s"
    assert len(table["rows"]) == 23
    assert table["rows"][0] == (1, 1.83)
    assert table["rows"][-1] == (4194304, 5911.47)
    assert table["buffers"] is None  # host buffers: OMB prints no buffer line


def test_osu_bw_article_gbps_is_the_best_size_in_decimal_megabytes():
    # the article: "5,900 MB/s (about 47 Gbps)"; the best row is 1048576 B at 5928.17 MB/s
    result = pt.osu_result("osu_bw", read("osu_bw_host_fdr_article.txt"))
    assert result["msg_size"] == 1048576
    assert result["gbps"] == pytest.approx(5928.17 * 8 / 1000, abs=0.001)


def test_osu_device_buffers_and_latency():
    bw = pt.parse_osu(read("osu_bw_dd_omb.txt"))
    assert bw["buffers"] == "DD"
    lat = pt.osu_result("osu_latency", read("osu_latency_dd_omb.txt"), lat_size=8)
    assert lat["lat_us"] == 2.79 and lat["msg_size"] == 8
    # a size the table lacks: the smallest printed size above zero
    assert pt.osu_result("osu_latency", read("osu_latency_dd_omb.txt"), lat_size=3)["msg_size"] == 1


def test_osu7_avg_latency_column():
    table = pt.parse_osu(read("osu_latency_omb7.txt"))
    assert table["column"] == "Avg Latency" and table["unit"] == "us"
    assert pt.osu_result("osu_latency", read("osu_latency_omb7.txt"))["lat_us"] == 2.64


def test_osu_without_table():
    assert pt.osu_result("osu_bw", "mpirun was unable to launch the specified application\n") is None


def test_perftest_text_gbits_with_cuda_preamble():
    text = read("ib_write_bw_gbits_cuda.txt")
    table = pt.parse_perftest_text(text)
    assert table["columns"] == ["#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]"]
    assert len(table["rows"]) == 1  # "CUDA device 0: PCIe address is 18:00" is no result row
    result = pt.perftest_result("ib_write_bw", text)
    assert result == {"gbps": 371.86, "lat_us": None, "msg_size": 65536, "source": "text"}


def test_perftest_text_mib_is_converted():
    result = pt.perftest_result("ib_read_bw", read("ib_read_bw_mib.txt"))
    assert result["gbps"] == pytest.approx(11468.52 * 1048576 * 8 / 1e9, abs=0.001)


def test_perftest_text_several_sizes_takes_the_largest():
    assert pt.perftest_result("ib_write_bw", read("ib_write_bw_all_sizes.txt"))["gbps"] == 392.1


BW_HEADER = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"


def bw_table(*rows, header=BW_HEADER):
    return "\n".join([header] + [" %-10s 5000             0.00               %s\t\t     0.725000" % r
                                  for r in rows]) + "\n"


def test_perftest_text_largest_message_size_of_the_table():
    # sizes out of order within one table: the largest size's row, not the last row
    result = pt.perftest_result("ib_write_bw", bw_table(("65536", "392.10"), ("2", "0.11"), ("4096", "179.90")))
    assert (result["gbps"], result["msg_size"]) == (392.1, 65536)


@pytest.mark.parametrize("tables, why", [
    # two tables (a second run printed after the first): whichever is taken, it is a guess
    ([[("65536", "392.10")], [("65536", "12.00")]], "2 result tables"),
    ([[("65536", "392.10")], [("2", "0.11")]], "2 result tables"),
    ([[("2", "0.11"), ("65536", "392.10")], [("4096", "179.90"), ("8", "0.30")]], "2 result tables"),
    # one table, the largest size twice
    ([[("65536", "392.10"), ("65536", "12.00")]], "2 rows for 65536 bytes"),
])
def test_perftest_text_ambiguous_output_is_refused_never_chosen(tables, why):
    text = "".join(bw_table(*rows) for rows in tables)
    with pytest.raises(pt.BenchError, match="perftest printed %s: which one is this run's is ambiguous" % why):
        pt.perftest_result("ib_write_bw", text)
    lat = read("ib_write_lat.txt")
    with pytest.raises(pt.BenchError, match="2 result tables"):
        pt.perftest_result("ib_write_lat", lat + lat)


def test_osu_ambiguous_output_is_refused_never_chosen():
    bw = read("osu_bw_host_fdr_article.txt")
    with pytest.raises(pt.BenchError, match="osu_bw printed 2 result tables"):
        pt.osu_result("osu_bw", bw + bw)
    lines = read("osu_latency_omb7.txt").splitlines()
    row = next(line for line in lines if line.split()[:1] == ["8"])
    with pytest.raises(pt.BenchError, match="osu_latency printed 8 bytes twice"):
        pt.osu_result("osu_latency", "\n".join(lines + [row.replace(row.split()[1], "99.0")]) + "\n")


NOT_FINITE_TEXT = ["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "-3.5"]


@pytest.mark.parametrize("value", NOT_FINITE_TEXT)
def test_perftest_text_figure_that_is_not_a_finite_number_is_refused(value):
    with pytest.raises(pt.BenchError, match=r"perftest column 'BW average\[Gb/sec\]': .*(finite|negative)"):
        pt.perftest_result("ib_write_bw", bw_table(("65536", value)))
    lat = read("ib_write_lat.txt").replace("1.06     ", value + "     ")
    with pytest.raises(pt.BenchError, match=r"perftest column 't_typical\[usec\]'"):
        pt.perftest_result("ib_write_lat", lat)


def test_perftest_text_message_size_that_is_not_finite_is_refused():
    with pytest.raises(pt.BenchError, match="'#bytes': inf is not a finite number"):
        pt.perftest_result("ib_write_bw", bw_table(("65536", "392.10"), ("inf", "1.0")))


@pytest.mark.parametrize("column", ["BW average[Gbps]", "BW average[GB/s]", "BW average[]"])
def test_perftest_unknown_bandwidth_unit_names_the_column(column):
    header = BW_HEADER.replace("BW average[Gb/sec]", column)
    with pytest.raises(pt.BenchError, match=re.escape("perftest column %r: unknown bandwidth unit" % column)):
        pt.perftest_result("ib_write_bw", bw_table(("65536", "392.10"), header=header))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400",
                                     pytest.param("1" + "0" * 400, id="10**400"), "-2.5",
                                     "true", "false", "null", '"371.86"', "[371.86]", "{}"])
def test_perftest_json_figure_must_be_a_finite_number(literal):
    bw = read("ib_write_bw.json").replace('"BW_average": 371.86', '"BW_average": %s' % literal)
    # the key is named, whatever the table on stdout says: the JSON report is the run's figure
    with pytest.raises(pt.BenchError, match=r"perftest JSON report: results\.BW_average: .*(not a|negative)"):
        pt.perftest_result("ib_write_bw", read("ib_write_bw_gbits_cuda.txt"), bw)
    lat = read("ib_write_lat.json").replace('"t_typical": 1.06', '"t_typical": %s' % literal)
    with pytest.raises(pt.BenchError, match=r"results\.t_typical: "):
        pt.perftest_result("ib_write_lat", "", lat)


def test_perftest_table_without_the_figure_column_names_the_columns():
    with pytest.raises(pt.BenchError, match=r"no 'BW average\[<unit>\]' column \(columns: #bytes, #iterations, "):
        pt.perftest_result("ib_write_bw", bw_table(("65536", "1.0"), header=BW_HEADER.replace("average", "mean")))
    with pytest.raises(pt.BenchError, match="no 't_typical"):
        lat = read("ib_write_lat.txt").replace("t_typical", "t_mode").replace("t_avg", "t_mean")
        pt.perftest_result("ib_write_lat", lat)


def test_perftest_json_without_the_key_falls_back_to_the_table():
    bw = read("ib_write_bw.json").replace('"BW_average": 371.86,', "")
    assert pt.perftest_result("ib_write_bw", read("ib_write_bw_gbits_cuda.txt"), bw)["source"] == "text"


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_osu_figure_that_is_not_finite_is_refused(value):
    bw = read("osu_bw_dd_omb.txt").splitlines()
    row = next(i for i, line in enumerate(bw) if line.startswith("1024 "))
    bw[row] = "1024 %s" % value
    with pytest.raises(pt.BenchError, match="osu_bw column 'Bandwidth' at 1024 bytes: .* not a finite"):
        pt.osu_result("osu_bw", "\n".join(bw))
    lat = "# OSU MPI-CUDA Latency Test v5.4.3\n# Size          Latency (us)\n0 1.5\n8 %s\n" % value
    with pytest.raises(pt.BenchError, match="osu_latency column 'Latency' at 8 bytes"):
        pt.osu_result("osu_latency", lat)


def test_perftest_latency_table():
    table = pt.parse_perftest_text(read("ib_write_lat.txt"))
    assert "99.9% percentile[usec]" in table["columns"] and "t_typical[usec]" in table["columns"]
    result = pt.perftest_result("ib_write_lat", read("ib_write_lat.txt"))
    assert result["lat_us"] == 1.06 and result["msg_size"] == 2


def test_perftest_json_report_preferred():
    result = pt.perftest_result("ib_write_bw", "no table here", read("ib_write_bw.json"))
    assert result == {"gbps": 371.86, "lat_us": None, "msg_size": 65536, "source": "json"}
    assert pt.perftest_result("ib_write_lat", "", read("ib_write_lat.json"))["lat_us"] == 1.06
    # without --report_gbits the JSON figure is MiB/s
    assert pt.perftest_result("ib_write_bw", "", read("ib_write_bw.json"), gbits=False)["gbps"] == \
        pytest.approx(371.86 * 1048576 * 8 / 1e9, abs=0.001)


def test_perftest_broken_json_falls_back_to_the_table():
    broken = read("ib_write_bw.json").replace('"results": {', '"results": {\nsl: 0,')
    result = pt.perftest_result("ib_write_bw", read("ib_write_bw_gbits_cuda.txt"), broken)
    assert result["source"] == "text" and result["gbps"] == 371.86
    with pytest.raises(pt.BenchError, match="not valid JSON"):
        pt.parse_perftest_json(broken)


def test_perftest_no_result():
    assert pt.perftest_result("ib_write_bw", " Couldn't connect to 127.0.0.1:18515\n") is None
    assert pt.perftest_result("ib_write_lat", "") is None


HELP_CUDA = """Usage:
  ib_write_bw            start a server and wait for connection
  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)
      --out_json  Save the report in a json file
      --out_json_file=<file>  Name of the report json file.
      --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MiB/sec) (SYMMETRIC)
      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing
      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device, based on its full PCIe address
"""


def test_help_features():
    assert pt.parse_help(HELP_CUDA) == {"out_json": True, "use_cuda": True, "use_cuda_bus_id": True,
                                        "report_gbits": True}
    debian = "\n".join(line for line in HELP_CUDA.splitlines() if "cuda" not in line and "json" not in line)
    assert pt.parse_help(debian) == {"out_json": False, "use_cuda": False, "use_cuda_bus_id": False,
                                     "report_gbits": True}


def test_osu_help_cuda():
    assert pt.osu_help_cuda("  -d --accelerator  <type>  accelerator device buffers can be of <type> `cuda'")
    assert not pt.osu_help_cuda("Usage: osu_bw [options]\n  -m, --message-size  [MIN:]MAX")
