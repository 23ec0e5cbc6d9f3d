"""Hostile strings every report writer is tested with: control characters (ESC and
NUL among them), bytes that were not UTF-8 (lone surrogates), markup, quotes, backslashes, line
breaks, the exposition format's own characters and a very long string."""

HOSTILE = [
    "esc \x1b[31mred\x1b[0m",
    "nul \x00 byte",
    "controls \x01\x07\x08\x0b\x0c\x0e\x1f\x7f\x85\x9f",
    "cr \r lf \n crlf \r\n tab \t",
    "undecodable \udcff\udc80 bytes",
    "lone \ud800 surrogate \udfff",
    "cdata ]]> end",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "\"><svg onload=alert(1)>",
    "quotes \" ' ` &quot;",
    "back\\slash \\n \\\" \\\\",
    "label {braces} a=\"x\",b=\"y\"} # HELP",
    "amp & &amp; &lt; &#0;",
    "nonchars \ufffe \uffff",
    "unicode \u00e9 \u2028 \u2029 \U0001f680",
    "--> <!-- comment",
    "</textarea></title></style></script>",
    "javascript:alert(1)",
    "x" * 100000,
]


# ---- strict readers of what the writers produce ---------------------------------------------
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402

_METRIC = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"((?:[^"\\\n]|\\[\\"n])*)"'
_LABELS = re.compile(r"\{(?:([a-zA-Z_][a-zA-Z0-9_]*)=%s(?:,([a-zA-Z_][a-zA-Z0-9_]*)=%s)*)?,?\}" % (_LABEL_VALUE, _LABEL_VALUE))
_SAMPLE = re.compile(r"^(%s)(\{.*\})? (\S+)$" % _METRIC)
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)=%s' % _LABEL_VALUE)
_FLOAT = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?Inf$|^NaN$")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_exposition(text):
    """{(name, ((label, value), ...)): float} of a Prometheus text exposition (format 0.0.4), read
    as strictly as Prometheus's own parser: valid UTF-8, HELP and TYPE before a family's samples,
    each family in one block, only the escapes \\\\ \\" \\n in label values, values a float64 can
    hold, no series twice. Raises AssertionError naming the line at fault."""
    text.encode("utf-8")  # a lone surrogate raises here
    assert text == "" or text.endswith("\n"), "no final line feed"
    out, seen, current, typed = {}, set(), None, set()
    for number, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d: %r" % (number, line[:200])
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            assert len(parts) >= 3 and re.match("^%s$" % _METRIC, parts[2]), where
            if parts[1] == "HELP":
                assert not re.search(r"\\[^\\n]", (parts + [""])[3].replace("\\\\", "")), "bad escape in HELP, " + where
            else:
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), where
                assert parts[2] not in typed, "TYPE twice, " + where
                typed.add(parts[2])
            if parts[2] != current:
                assert parts[2] not in seen, "family split in two blocks, " + where
                seen.add(parts[2])
                current = parts[2]
            continue
        if line.startswith("#") or not line.strip():
            continue
        match = _SAMPLE.match(line)
        assert match, "not a sample, " + where
        name, labels, value = match.groups()
        assert name == current or name not in seen, "family split in two blocks, " + where
        if name != current:
            seen.add(name)
            current = name
        pairs = ()
        if labels:
            assert _LABELS.fullmatch(labels), "bad label set, " + where
            pairs = tuple((k, re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], v)) for k, v in _PAIR.findall(labels))
            assert len({k for k, _ in pairs}) == len(pairs), "label twice, " + where
        assert _FLOAT.match(value), "bad value, " + where
        number_ = float(value)
        assert not (math.isinf(number_) and "Inf" not in value), "value beyond a float64, " + where
        key = (name, tuple(sorted(pairs)))
        assert key not in out, "series twice, " + where
        out[key] = number_
    return out


def strict_json(data):
    """The document in ``data`` (bytes) read as strict JSON: UTF-8, no NaN or Infinity, no lone
    surrogate in any string."""
    def no_constant(name):
        raise AssertionError("not JSON: %s" % name)
    doc = json.loads(data.decode("utf-8"), parse_constant=no_constant)

    def walk(value):
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(doc)
    return doc
