"""Compares two wheels member by member; says where they differ.

Usage: compare_wheels.py EXPECTED ACTUAL
Prints one line per member only in one wheel or with other bytes (with the offset and
bytes of the first difference) and exits 1, or prints "identical" and exits 0. Zip
metadata (timestamps, permissions, order) counts too: the wheels' bytes are what must match.
"""

import sys
import zipfile


def first_difference(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n, a[n:n + 16].hex(" "), b[n:n + 16].hex(" ")


def main():
    expected_path, actual_path = sys.argv[1:]
    expected, actual = zipfile.ZipFile(expected_path), zipfile.ZipFile(actual_path)
    a = {i.filename: i for i in expected.infolist()}
    b = {i.filename: i for i in actual.infolist()}
    lines = [f"only in {expected_path}: {n}" for n in sorted(a.keys() - b.keys())]
    lines += [f"only in {actual_path}: {n}" for n in sorted(b.keys() - a.keys())]
    for name in sorted(a.keys() & b.keys()):
        data_a, data_b = expected.read(name), actual.read(name)
        if data_a != data_b:
            offset, bytes_a, bytes_b = first_difference(data_a, data_b)
            lines.append(
                f"differs: {name} ({len(data_a)} vs {len(data_b)} bytes), first at byte {offset}: "
                f"{bytes_a or '<end>'} | {bytes_b or '<end>'}"
            )
        elif (a[name].date_time, a[name].external_attr) != (b[name].date_time, b[name].external_attr):
            lines.append(f"differs: {name}: same bytes, other zip timestamp or permissions")
    if not lines and open(expected_path, "rb").read() != open(actual_path, "rb").read():
        lines.append("same members, but the zip files differ (member order or compression)")
    print("\n".join(lines) or "identical")
    sys.exit(1 if lines else 0)


if __name__ == "__main__":
    main()
