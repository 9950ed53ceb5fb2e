// A step that forks into two streams and joins again, per launch or as one captured graph.
//
// Build:  nvcc -O2 -o cuda_streams examples/frameworks/cuda_streams.cu -ldl
// Usage:  ./cuda_streams {eager,graph} [steps]
//
// Each step: a "norm" kernel on stream A; stream B waits for it (an event); then 10 small
// kernels on A and 10 on B run side by side; A waits for B's last (another event); a
// final "join" kernel on A. `eager` launches the 22 kernels every step; `graph` captures
// one step once (stream capture on A that follows the fork and the join through the
// events), instantiates it, and launches the graph every step. Each step is an NVTX range
// "step" (NVTX v3, header-only). Prints one RESULT line: the mean step time over the timed
// steps (after 20 warm-up steps, wall clock, device synchronised at both ends).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__global__ void norm(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}
__global__ void branch(float* y, const float* x, int n, float k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * 0.9f + k * x[i];
}
__global__ void join(float* x, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.5f * (a[i] + b[i]);
}

static void step(cudaStream_t a, cudaStream_t b, cudaEvent_t forked, cudaEvent_t joined,
                 float* x, float* ya, float* yb, int n) {
  const int threads = 256, blocks = (n + threads - 1) / threads;
  norm<<<blocks, threads, 0, a>>>(x, n);
  CHECK(cudaEventRecord(forked, a));
  CHECK(cudaStreamWaitEvent(b, forked, 0));
  for (int k = 0; k < 10; ++k) {
    branch<<<blocks, threads, 0, a>>>(ya, x, n, 0.01f * k);
    branch<<<blocks, threads, 0, b>>>(yb, x, n, 0.02f * k);
  }
  CHECK(cudaEventRecord(joined, b));
  CHECK(cudaStreamWaitEvent(a, joined, 0));
  join<<<blocks, threads, 0, a>>>(x, ya, yb, n);
}

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "eager") && std::strcmp(argv[1], "graph"))) {
    std::fprintf(stderr, "usage: %s {eager,graph} [steps]\n", argv[0]);
    return 2;
  }
  const bool graph = !std::strcmp(argv[1], "graph");
  const int steps = argc > 2 ? std::atoi(argv[2]) : 2000, warm = 20, n = 1 << 14;
  float *x, *ya, *yb;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&ya, n * sizeof(float)));
  CHECK(cudaMalloc(&yb, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMemset(ya, 0, n * sizeof(float)));
  CHECK(cudaMemset(yb, 0, n * sizeof(float)));
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cudaEvent_t forked, joined;
  CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    step(a, b, forked, joined, x, ya, yb, n);
    CHECK(cudaStreamEndCapture(a, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  std::chrono::steady_clock::time_point began;
  for (int i = 0; i < steps; ++i) {
    if (i == warm) {
      CHECK(cudaDeviceSynchronize());
      began = std::chrono::steady_clock::now();
    }
    nvtxRangePushA("step");
    if (graph) CHECK(cudaGraphLaunch(exec, a));
    else step(a, b, forked, joined, x, ya, yb, n);
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count();
  std::printf("RESULT {\"mode\": \"%s\", \"step_us\": %.3f, \"steps\": %d}\n", argv[1], us / (steps - warm), steps);
  return 0;
}
