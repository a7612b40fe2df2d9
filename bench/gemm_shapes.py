# The GEMM shapes of the training-step bench (bench/run.sh train: teacher D=288, student D=192,
# F=768/512, V=32000, M = 8 x 256 tokens), each timed alone in python3-torch: OpenBLAS
# (F.linear, and the weight gradient dY^T X) beside oneDNN (mkldnn_linear, in Debian's libtorch).
# GFLOP/s, best of 5, 2 threads. Run with the OPENBLAS_CORETYPE that bench/run.sh prints.
# usage: OPENBLAS_CORETYPE=Cooperlake /usr/bin/python3 bench/gemm_shapes.py
import torch, time
torch.set_num_threads(2)
def bench(f, n=5):
    f(); best=1e9
    for _ in range(n):
        t=time.perf_counter(); f(); best=min(best,time.perf_counter()-t)
    return best
M=2048
for (N,K) in [(32000,288),(32000,192),(288,288),(768,288),(288,768),(192,192),(512,192),(192,512),(2048,2048)]:
    x=torch.randn(M,K); w=torch.randn(N,K)
    t=bench(lambda: torch.nn.functional.linear(x,w))
    xm=x.to_mkldnn(); wm=w.to_mkldnn()
    try:
        tm=bench(lambda: torch._C._nn.mkldnn_linear(xm,wm,None))
    except Exception as e:
        tm=float('nan'); print(e)
    # backward-like: dW = dY^T X  [N,M]x[M,K]
    dy=torch.randn(M,N)
    tb=bench(lambda: dy.t().mm(x))
    fl=2*M*N*K/1e9
    print(f"M={M} N={N} K={K}: linear {fl/t:6.1f} GF/s, mkldnn {fl/tm:6.1f} GF/s, dW {fl/tb:6.1f} GF/s")
