# Writes a .npy file without NumPy (for lit run tests):
#   python3 npy.py OUT.npy DTYPE SHAPE VALUES
# DTYPE f32, i64 or i32; SHAPE dims separated by commas ("" for a 0-d array); VALUES
# comma-separated, row-major, or "fill=V": every element V.
import struct
import sys

out, dtype, shape_text, values_text = sys.argv[1:5]
descr, code, conv = {"f32": ("<f4", "f", float), "i64": ("<i8", "q", int),
                     "i32": ("<i4", "i", int)}[dtype]
shape = [int(d) for d in shape_text.split(",") if d]
if not values_text.startswith("fill="):
    values = [conv(v) for v in values_text.split(",") if v]
else:
    count = 1
    for d in shape:
        count *= d
    values = [conv(values_text[5:])] * count
dims = "(%s)" % (str(shape[0]) + "," if len(shape) == 1 else ", ".join(map(str, shape)))
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1"))
    f.write(struct.pack("<%d%s" % (len(values), code), *values))
