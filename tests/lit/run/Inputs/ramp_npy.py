# Writes an f32 .npy file whose every element is its index along one axis (without NumPy):
#   python3 ramp_npy.py OUT.npy SHAPE [AXIS]      (SHAPE: dims separated by commas; AXIS: 0)
import struct
import sys

out, shape_text = sys.argv[1:3]
axis = int(sys.argv[3]) if len(sys.argv) > 3 else 0
shape = [int(d) for d in shape_text.split(",")]
inner = 1
for d in shape[axis + 1:]:
    inner *= d
count = 1
for d in shape:
    count *= d
values = [float(i // inner % shape[axis]) for i in range(count)]
dims = "(%s)" % (str(shape[0]) + "," if len(shape) == 1 else ", ".join(map(str, shape)))
header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % dims
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1"))
    f.write(struct.pack("<%df" % len(values), *values))
