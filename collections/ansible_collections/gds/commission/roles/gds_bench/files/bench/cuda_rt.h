/* The CUDA runtime and libcufile, loaded with dlopen at run time. One binary
 * then runs the CPU transfer types on a node without the GPU stack and gives a
 * clear error, not a loader failure, for the GPU types. Prototypes come from
 * the real headers (cuda_runtime_api.h, cufile.h), so calls are type-checked. */
#ifndef GDSBENCH_CUDA_RT_H
#define GDSBENCH_CUDA_RT_H
#ifdef HAVE_CUDA

#include <cuda_runtime_api.h>
#include <cufile.h>

#include "gdsbench.h"

#define CUDA_FUNCS(X) \
	X(cudaGetDeviceCount) X(cudaSetDevice) X(cudaMalloc) X(cudaFree) \
	X(cudaMallocHost) X(cudaFreeHost) X(cudaMemcpy) X(cudaMemcpyAsync) X(cudaMemset) \
	X(cudaStreamCreateWithFlags) X(cudaStreamDestroy) X(cudaStreamSynchronize) \
	X(cudaStreamQuery) X(cudaGetErrorString) X(cudaDeviceGetPCIBusId) \
	X(cudaDriverGetVersion) X(cudaRuntimeGetVersion)

#define CUFILE_FUNCS(X) \
	X(cuFileDriverOpen) X(cuFileDriverClose) X(cuFileDriverGetProperties) \
	X(cuFileHandleRegister) X(cuFileHandleDeregister) X(cuFileBufRegister) \
	X(cuFileBufDeregister) X(cuFileRead) X(cuFileWrite)

/* Optional CUDA runtime calls (-p); callers check for NULL. */
#define CUDA_OPT_FUNCS(X) X(cudaDeviceCanAccessPeer) X(cudaDeviceEnablePeerAccess)

/* Optional: older libcufile releases lack some; callers check for NULL. */
#define CUFILE_OPT_FUNCS(X) \
	X(cuFileReadAsync) X(cuFileWriteAsync) X(cuFileStreamRegister) X(cuFileStreamDeregister) \
	X(cuFileBatchIOSetUp) X(cuFileBatchIOSubmit) X(cuFileBatchIOGetStatus) \
	X(cuFileBatchIOCancel) X(cuFileBatchIODestroy) X(cuFileGetVersion) \
	X(cuFileGetParameterBool) X(cuFileGetParameterSizeT) X(cuFileSetParameterBool) \
	X(cuFileSetParameterSizeT) X(cuFileSetStatsLevel) X(cuFileStatsStart) \
	X(cuFileStatsReset) X(cuFileGetStatsL1) X(cuFileGetStatsL3)

#define CU_DECL(f) __typeof__(&f) f;
struct cuapi {
	CUDA_FUNCS(CU_DECL)
	CUDA_OPT_FUNCS(CU_DECL)
	CUFILE_FUNCS(CU_DECL)
	CUFILE_OPT_FUNCS(CU_DECL)
	int cuda_loaded, cufile_loaded, cufile_open;
	int ndev;
	int stats_level;	/* cuFile stats level we enabled (0 = none) */
	char cudart_path[PATH_MAX], cufile_path[PATH_MAX];
};
#undef CU_DECL

extern struct cuapi cu;
extern int g_cufile_stats_level;	/* --cufile-stats */

int gpu_global_init(int need_cufile, char *err, size_t errlen);
void gpu_global_exit(void);
int gpu_bind(struct worker *w);		/* cudaSetDevice in this thread + range check */
const char *cufile_errstr(CUfileError_t e, char *buf, size_t len);
const char *cufile_io_strerror(ssize_t res, char *buf, size_t len);
const char *cuda_errstr(cudaError_t e);

/* Every GPU engine's thread state starts with this (w->priv points to it). */
struct gpu_base {
	void *dev;		/* cudaMalloc (or the -m host memory): depth x io_size, one region */
	void *staging;		/* cudaMallocHost: host view for the verify pattern */
	size_t len;
	int registered;		/* cuFileBufRegister done */
	cudaStream_t copy;	/* stream for staging copies, synchronised per copy */
};

/* shared by the two host-bounce engines (xfer 2 and 4) and the cuFile ones */
int gpu_slots_alloc(struct worker *w, int depth);
void gpu_slots_free(struct worker *w);
int gpu_to_host(struct worker *w, struct slot *s);
int gpu_from_host(struct worker *w, struct slot *s);
int cufile_register_fd(struct worker *w);
void cufile_deregister_fd(struct worker *w);
int cufile_register_buf(struct worker *w);
void cufile_deregister_buf(struct worker *w);

/* the host bounce of xfer 2 and 4: the engines differ only in the open mode */
int bounce_global_init(char *err, size_t errlen);
int bounce_thread_init(struct worker *w);
void bounce_thread_exit(struct worker *w);
ssize_t bounce_io(struct worker *w, struct slot *s);
const char *bounce_strerror(ssize_t res, char *buf, size_t len);

/* --cufile-param NAME=VALUE, applied before cuFileDriverOpen */
int cufile_param_add(const char *spec, char *err, size_t errlen);
size_t cufile_queue_limit(void);
void cufile_param_evidence(struct path_info *pi);

#endif
#endif
