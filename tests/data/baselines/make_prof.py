"""How tests/data/baselines/course_bottleneck.prof was made (kept in the README there)."""
import cProfile, sys
SRC = '''
def parse(line):
    return [int(x) for x in line.split(",")]

def slow_sum(rows):
    total = 0
    for row in rows:
        for x in row:
            total += x
    return total

def fast_sum(rows):
    return sum(map(sum, rows))

def main():
    lines = [",".join(str(i + j) for j in range(20)) for i in range(3000)]
    rows = [parse(line) for line in lines]
    return slow_sum(rows), fast_sum(rows), sorted(rows, key=len)[0][0]
'''
ns = {}
exec(compile(SRC, "/home/student/course/bottleneck.py", "exec"), ns)
p = cProfile.Profile()
p.runcall(ns["main"])
p.dump_stats(sys.argv[1])
