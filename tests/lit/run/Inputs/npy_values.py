# Prints the values of a .npy file, comma-separated, exactly (integers as integers; no NumPy):
#   python3 npy_values.py FILE.npy
# for checks of values a checksum cannot tell apart (e.g. i64 past 2^53).
import ast
import struct
import sys

with open(sys.argv[1], "rb") as f:
    data = f.read()
assert data[:6] == b"\x93NUMPY", "not a .npy file"
hlen = struct.unpack("<H", data[8:10])[0]
header = ast.literal_eval(data[10:10 + hlen].decode("latin-1"))
codes = {"<i8": "q", "<i4": "i", "<f4": "f", "<f8": "d", "<u8": "Q", "|b1": "?", "|u1": "B"}
code = codes[header["descr"]]
count = 1
for d in header["shape"]:
    count *= d
body = data[10 + hlen:]
values = struct.unpack("<%d%s" % (count, code), body[:count * struct.calcsize(code)])
print("%s: %s" % (header["descr"], ",".join(str(v) for v in values)))
