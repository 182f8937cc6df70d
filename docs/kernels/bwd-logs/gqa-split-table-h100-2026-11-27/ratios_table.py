import csv,glob,collections,sys
d=sys.argv[1]; arms=sys.argv[2:]
data=collections.defaultdict(dict)
for a in arms:
  for f in glob.glob(f"{d}/*-{a}[0-9].csv"):
    for r in csv.DictReader(open(f)):
      k=(r["impl"],r["D"],r["causal"],int(r["S_q"]))
      data[k][a]=max(data[k].get(a,0),float(r["value"]))
cud={k[1:]:v[arms[0]] for k,v in data.items() if k[0]=="sdpa_cudnn"}
for k in sorted(data):
  if k[0]=="sdpa_cudnn": continue
  v=data[k]; b=v[arms[0]]
  print(f"{k[0][:13]:13} D{k[1]:3} c={k[2][0]} S={k[3]:5} base {b:6.1f} ({b/cud[k[1:]]:.2f}x cudnn) "+" ".join(f"{a}:{v[a]/b:.3f}" for a in arms[1:]))
