/* gopt_cudnn.h: the cuDNN convolution gopt runs, one definition for the CUDA calibrator
 * (calib_cuda.cu: its convolution table, which the cost model prices GPU convolutions from) and
 * the CUDA runtime (runtime/cuda.cu: the convolutions of a real step), so that the runtime runs
 * what the profile measured.
 *
 * The convolution: float32 NCHW input (n, c, h, w), a square r x r filter of k output channels,
 * stride 1, padding r / 2 (r odd: the output is n x k x h x w), cross-correlation. The algorithm
 * is the first of cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7, asked with cuDNN's
 * default math, which allows TF32 tensor cores where the GPU has them, as PyTorch allows them for
 * convolutions; nothing is timed, so the choice is deterministic for a GPU and a cuDNN version)
 * whose workspace fits GOPT_CUDNN_WS_CAP, run with the math type the heuristics give for it.
 * Built when CMake finds cuDNN (GOPT_WITH_CUDNN); include it from CUDA sources only.
 */
#ifndef GOPT_CUDNN_H
#define GOPT_CUDNN_H

#include <cudnn.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The workspace cap both give the heuristics (bytes). */
#define GOPT_CUDNN_WS_CAP ((size_t)256 << 20)

/* Set the descriptors (created by the caller) to the convolution above, with math type `math`
 * (CUDNN_DEFAULT_MATH to ask the heuristics; then the one gopt_cudnn_conv_algo gave, to run it).
 * Dimensions must be >= 1 and each tensor below 2^31 elements (cuDNN's 4-d descriptors). Returns
 * cuDNN's status. */
cudnnStatus_t gopt_cudnn_conv_describe(int n, int c, int h, int w, int k, int r, cudnnMathType_t math,
                                       cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t filt,
                                       cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y);

/* The algorithm (a cudnnConvolutionFwdAlgo_t) cuDNN's heuristics rank first among those that
 * succeed with a workspace of at most ws_cap bytes, for descriptors set by
 * gopt_cudnn_conv_describe on handle h's GPU; -1 when none fits or the query fails. *ws_bytes
 * receives its workspace (the larger of the heuristics' figure and
 * cudnnGetConvolutionForwardWorkspaceSize's), *math the math type to run it with (as PyTorch
 * sets it); either may be NULL. */
int gopt_cudnn_conv_algo(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t filt,
                         cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, size_t ws_cap,
                         size_t *ws_bytes, cudnnMathType_t *math);

#ifdef __cplusplus
}
#endif

#endif /* GOPT_CUDNN_H */
