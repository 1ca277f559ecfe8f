# Regenerates python_golden.json with CPython (3.11 was used):
#   python3 testdata/gen_golden.py > testdata/python_golden.json
import json
import random

seeds = [0, 1, 42, 20260729, -7, 2**32 - 1, 2**32, 2**63 - 1, -(2**63), 123456789012345]
cases = []
for s in seeds:
    r = random.Random(s)
    u32 = [r.getrandbits(32) for _ in range(5)]
    r = random.Random(s)
    bits = [[k, r.getrandbits(k) & (2**64 - 1)] for k in (0, 1, 7, 31, 32, 33, 53, 64, 100)]
    r = random.Random(s)
    rnd = [r.random().hex() for _ in range(5)]
    r = random.Random(s)
    lst = list(range(40))
    r.shuffle(lst)
    r = random.Random(s)
    expo = [r.expovariate(l).hex() for l in (0.5, 1.0, 3.7, 100.0)]
    cases.append(dict(seed=s, u32=u32, bits=bits, random=rnd, shuffle=lst, expo=expo))

r = random.Random(20260729)
big = list(range(1000))
r.shuffle(big)
r = random.Random(7)
many_expo = [r.expovariate(1.0).hex() for _ in range(5000)]
print(json.dumps(dict(cases=cases, shuffle1000_seed20260729=big, expo5000_seed7=many_expo)))
