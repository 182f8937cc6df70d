"""CPU model of the persistent forward kernel's static tile walk under a causal mask: the
largest per-CTA load over the ideal for the snake walk of the grid order (what the kernel
does), a greedy dynamic assignment (what the hardware block scheduler does for the
non-persistent grid), the snake over tiles sorted by work, and heavy/light pairs of row
blocks (m, num_m - 1 - m) of one (batch, head). Work of a tile = its key tiles + 1.

    python3 scripts/dev/fwd_sched_model.py
"""
import heapq
def tiles_grid_order(B,H,S,G,bm=128,bn=128):
    num_m=(S+bm-1)//bm; nbh=B*H
    out=[]
    ngroups=(nbh+G-1)//G
    for z in range(ngroups):
        gsize=min(G,nbh-z*G)
        for y in range(num_m):
            m=num_m-1-y
            for x in range(gsize):
                out.append((z*G+x,m))
    return out
def work(m,bm=128,bn=128,ovh=1.0):  # causal: key tiles seen + fixed per-tile overhead (in tile units)
    return (m*bm+bm)//bn + ovh
def snake(ts,P):
    loads=[0.0]*P
    for r in range(0,len(ts),P):
        chunk=ts[r:r+P]
        for i,t in enumerate(chunk):
            c = i if (r//P)%2==0 else P-1-i
            loads[c]+=work(t[1])
    return max(loads)
def greedy(ts,P):
    h=[(0.0,c) for c in range(P)]
    for t in ts:
        l,c=heapq.heappop(h); heapq.heappush(h,(l+work(t[1]),c))
    return max(l for l,c in h)
def sorted_snake(ts,P):
    return snake(sorted(ts,key=lambda t:-t[1]),P)
P=132
import math
for (B,H,S,D) in [(1,16,16384,128),(2,16,8192,128),(4,16,4096,128),(16,16,1024,128),(32,16,512,128),(1,8,16384,256)]:
    kv=S*D*2*2; l2=50*2**20
    nbh=B*H; G=max(1,min(l2//kv,nbh)); groups=math.ceil(nbh/G); G=math.ceil(nbh/groups)
    bn=128 if D<=128 else 64
    ts=tiles_grid_order(B,H,S,G)
    total=sum(work(t[1]) for t in ts); ideal=total/P
    print(f"B{B} H{H} S{S} D{D} G{G}: tiles {len(ts)} ideal {ideal:.0f}  snake {snake(ts,P)/ideal:.3f}  greedy(HW-like) {greedy(ts,P)/ideal:.3f}  sorted-snake {sorted_snake(ts,P)/ideal:.3f}")
def paired(B,H,S,G,P,bm=128):
    num_m=(S+bm-1)//bm; nbh=B*H
    units=[]
    ngroups=(nbh+G-1)//G
    for z in range(ngroups):
        gsize=min(G,nbh-z*G)
        for pi in range((num_m+1)//2):
            for x in range(gsize):
                hi=num_m-1-pi; lo=pi
                units.append(work(hi)+(work(lo) if lo<hi else 0))
    loads=[0.0]*P
    for i,u in enumerate(units):
        r=i//P; c=i%P if r%2==0 else P-1-i%P
        loads[c]+=u
    return max(loads)
print("paired:")
for (B,H,S,D) in [(1,16,16384,128),(2,16,8192,128),(4,16,4096,128),(16,16,1024,128),(32,16,512,128),(1,8,16384,256)]:
    kv=S*D*2*2; l2=50*2**20
    nbh=B*H; G=max(1,min(l2//kv,nbh)); groups=math.ceil(nbh/G); G=math.ceil(nbh/groups)
    ts=tiles_grid_order(B,H,S,G)
    total=sum(work(t[1]) for t in ts); ideal=total/P
    print(f"B{B} H{H} S{S} D{D}: paired {paired(B,H,S,G,P)/ideal:.3f}  greedy {greedy(ts,P)/ideal:.3f}")
