# peer_attention.py: the peer for bench-cuda_attention's encoder row: PyTorch's
# scaled_dot_product_attention (bf16, the same shape: batch 8, 8 heads of 160,
# 438 frames, with a per-head additive bias like the relative-position term,
# and without), timed with CUDA events, median of 20 rounds of 10 calls.
# Run on the GPU machine (its python3 has PyTorch): python3 bench/peer_attention.py
import torch, torch.nn.functional as F
torch.manual_seed(0)
B,H,T,D=8,8,438,160
q,k,v=[torch.randn(B,H,T,D,device='cuda',dtype=torch.bfloat16) for _ in range(3)]
bias=torch.randn(1,H,T,T,device='cuda',dtype=torch.bfloat16)
def run(m):
    return F.scaled_dot_product_attention(q,k,v,attn_mask=m,scale=D**-0.5)
for m,name in ((bias,'with bias'),(None,'no bias')):
    for _ in range(5): run(m)
    torch.cuda.synchronize()
    ts=[]
    for _ in range(20):
        s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
        s.record(); [run(m) for _ in range(10)]; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e)/10)
    ts.sort(); ms=ts[len(ts)//2]
    print(f"torch sdpa bf16 {name}: {ms:.3f} ms, {4*B*H*T*T*D/ms/1e9:.1f} TFLOP/s")
