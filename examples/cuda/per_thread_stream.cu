// A launch-bound loop of tiny kernels, built two ways: with the legacy default stream
// (nvcc -O2) and with the per-thread default stream (nvcc -O2 --default-stream
// per-thread), whose runtime entry points nsys records as NAME_ptsz
// (cudaLaunchKernel_ptsz_v7000, cudaStreamSynchronize_ptsz_v7000).
//
// Each step: an NVTX range "step" in the domain "launchprof" (launchprof's step marker),
// 8 launches of a one-block kernel on the default stream, one cudaStreamSynchronize.
// Prints the mean step time measured by the program itself (steady_clock), for the
// prediction to be checked against.
//
//   nvcc -O2 [--default-stream per-thread] -o loop per_thread_stream.cu
//   ./loop [STEPS]            (default 300)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void add(float* x, float v) { x[threadIdx.x] += v; }

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  nvtxDomainHandle_t domain = nvtxDomainCreateA("launchprof");
  nvtxEventAttributes_t step = {};
  step.version = NVTX_VERSION;
  step.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  step.messageType = NVTX_MESSAGE_TYPE_ASCII;
  step.message.ascii = "step";
  float* x;
  cudaMalloc(&x, 256 * sizeof(float));
  add<<<1, 256>>>(x, 0.0f);  // warm-up: module load
  cudaStreamSynchronize(0);
  auto begin = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    nvtxDomainRangePushEx(domain, &step);
    for (int k = 0; k < 8; ++k) add<<<1, 256>>>(x, 1.0f);
    cudaStreamSynchronize(0);
    nvtxDomainRangePop(domain);
  }
  auto end = std::chrono::steady_clock::now();
  std::printf("steps %d step_us %.2f %s\n", steps,
              std::chrono::duration<double, std::micro>(end - begin).count() / steps,
              cudaGetErrorString(cudaGetLastError()));
  cudaFree(x);
  return 0;
}
