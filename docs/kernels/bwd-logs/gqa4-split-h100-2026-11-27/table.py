import csv,glob,collections,sys
d=sys.argv[1]
data=collections.defaultdict(dict)
for f in glob.glob(f"{d}/*.csv"):
  tag=f.rsplit("-",1)[1][:-4]
  for r in csv.DictReader(open(f)):
    data[(r["impl"],r["D"],int(r["S_q"]))][tag]=float(r["value"])
for k in sorted(data):
  if k[0]=="sdpa_cudnn": continue
  v=data[k]; b=max(v["a0"],v["b0"]); c=data[("sdpa_cudnn",)+k[1:]]["a0"]
  print(f"{k[0][:13]:13} D{k[1]:3} S={k[2]:5} never {b:6.1f} ({b/c:.2f}x cudnn; rounds {v['a0']:.0f}/{v['b0']:.0f}) 2:{v['a2']/b:.3f} 4:{v['a4']/b:.3f}")
