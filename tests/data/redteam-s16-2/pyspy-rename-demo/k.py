def work(n):
    t = 0
    for i in range(n):
        t += i * i % 7
    return t
work.__code__ = work.__code__.replace(co_name="make_items", co_qualname="make_items", co_filename="main.py", co_firstlineno=28)
