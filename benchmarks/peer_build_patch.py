"""Patch a COPY of upstream causal-conv1d's source tree (run in its root) so that it builds quickly
on the device machine, without touching its kernels:

* setup.py hard-codes nine -gencode pairs: keep only sm_90 (the card there);
* csrc/causal_conv1d_{fwd,bwd}.cu instantiate every (input, weight) dtype pair in one translation
  unit (upstream's bwd file took 385 s in one nvcc process for sm_90 alone, the first device
  run): split each file into one translation unit per explicit instantiation (the same source with
  the other instantiation lines removed), so the build spreads over the cores. The code of each
  instantiation is unchanged.
"""

import re
from pathlib import Path

s = Path("setup.py").read_text()
pat = r'cc_flag\.append\("-gencode"\)\s*\n(\s*)cc_flag\.append\("arch=compute_(\d+),code=sm_\d+"\)'
s, n = re.subn(pat, lambda m: m.group(0) if m.group(2) == "90" else m.group(1) + "pass", s)
print("patched gencodes:", n, "-> sm_90 only")
for f in ("causal_conv1d_fwd.cu", "causal_conv1d_bwd.cu"):
    lines = Path("csrc", f).read_text().splitlines(keepends=True)
    inst = [i for i, line in enumerate(lines) if line.startswith("template void ")]
    names = []
    for k, i in enumerate(inst):
        keep = [line for j, line in enumerate(lines) if j not in inst or j == i]
        name = f"csrc/split_{f[:-3]}_{k:02d}.cu"
        Path(name).write_text("".join(keep))
        names.append(name)
    old = f'"csrc/{f}",'
    assert old in s, old
    s = s.replace(old, " ".join(f'"{x}",' for x in names))
    print(f"{f}: {len(names)} translation units")
Path("setup.py").write_text(s)
