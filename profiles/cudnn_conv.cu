/* cudnn_conv.cu: the cuDNN convolution of gopt_cudnn.h, shared by the CUDA calibrator and the
 * CUDA runtime. Host code only: descriptors and cuDNN's heuristics (no kernel is run or timed
 * here). Built when CMake finds cuDNN. */
#include "gopt_cudnn.h"

extern "C" cudnnStatus_t gopt_cudnn_conv_describe(int n, int c, int h, int w, int k, int r, cudnnMathType_t math,
                                                  cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t filt,
                                                  cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
    cudnnStatus_t s = cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetFilter4dDescriptor(filt, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetConvolution2dDescriptor(conv, r / 2, r / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionMathType(conv, math);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w);
    return s;
}

extern "C" int gopt_cudnn_conv_algo(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t filt,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, size_t ws_cap,
                                    size_t *ws_bytes, cudnnMathType_t *math) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    if (cudnnGetConvolutionForwardAlgorithm_v7(h, x, filt, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf) !=
        CUDNN_STATUS_SUCCESS)
        return -1;
    for (int i = 0; i < got; i++) {
        /* the workspace cuDNN asks for at run time: the heuristics' estimate or more */
        size_t need = 0;
        if (perf[i].status != CUDNN_STATUS_SUCCESS ||
            cudnnGetConvolutionForwardWorkspaceSize(h, x, filt, conv, y, perf[i].algo, &need) != CUDNN_STATUS_SUCCESS)
            continue;
        if (need < perf[i].memory) need = perf[i].memory;
        if (need > ws_cap) continue;
        if (ws_bytes) *ws_bytes = need;
        if (math) *math = perf[i].mathType;
        return (int)perf[i].algo;
    }
    return -1;
}
