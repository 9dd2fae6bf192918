"""How tests/data/baselines/live_cpu_training.trace.json.gz was recorded (its README says so):
a small CPU training loop under %%torchprof --memory --stack --shapes --modules --lines, its
batches from a DataLoader of two forked workers, a list keeping each step's loss (and its graph)."""
import sys, os, textwrap
from pathlib import Path
from IPython.testing.globalipapp import start_ipython

folder = Path(sys.argv[2]); folder.mkdir(parents=True, exist_ok=True)
(folder / "course_data.py").write_text(textwrap.dedent('''
    import time
    import torch
    from torch.utils.data import Dataset

    class Points(Dataset):
        """Points of 16 features in 4 classes; each sample takes about a millisecond to make."""
        def __len__(self):
            return 96

        def __getitem__(self, i):
            time.sleep(0.001)
            g = torch.Generator().manual_seed(i)
            return torch.randn(16, generator=g), i % 4
'''))
sys.path.insert(0, str(folder))
ip = start_ipython()
ip.run_line_magic("load_ext", "nbprof")
setup = '''
import torch, nbprof
from torch.utils.data import DataLoader
from course_data import Points
torch.manual_seed(0)
loader = DataLoader(Points(), batch_size=16, num_workers=2, multiprocessing_context="fork")
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
'''
r = ip.run_cell(setup); assert r.error_in_exec is None, r.error_in_exec
cell = '''%%torchprof -q --memory --stack --shapes --modules --lines -o p
for x, y in loader:
    with torch.profiler.record_function("train_step"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    kept.append(loss)  # each step's loss kept, and the graph behind it
    nbprof.step()
'''
r = ip.run_cell(cell); assert r.error_in_exec is None, r.error_in_exec
p = ip.user_ns["p"]
print(p.report().text()[:600])
print(p.save(sys.argv[1]))
