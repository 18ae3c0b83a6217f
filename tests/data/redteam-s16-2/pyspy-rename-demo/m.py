import k

print(k.work(3_000_000))
