from kernel import Grid, dedupe


def make_items(n):
    items = []
    for i in range(n):
        items.append(i % 7)
    return items


def main():
    items = make_items(100)
    result = dedupe(items)
    grid = Grid(items, None)
    return result, grid.total()
