"""Checks a diagnostic of relaxc: at most MAX bytes, only printable ASCII (and tabs, newlines),
every quoted source line at most 130 columns, and the caret under the character CHAR.
usage: excerpt.py ERRFILE MAX CHAR"""
import sys

data = open(sys.argv[1], "rb").read()
limit, char = int(sys.argv[2]), sys.argv[3]
assert data, "no diagnostic"
assert len(data) <= limit, "%d bytes of diagnostic (at most %d)" % (len(data), limit)
bad = [c for c in data if not (32 <= c < 127 or c in (9, 10))]
assert not bad, "unprintable bytes %r in %r" % (bad[:8], data[:300])
lines = data.decode().split("\n")
carets = [i for i, l in enumerate(lines) if l.strip() == "^"]
assert carets, "no caret line in %r" % data[:300]
for i in carets:
    quoted, caret = lines[i - 1], lines[i]
    assert len(quoted) <= 130, "a quoted line of %d columns" % len(quoted)
    col = caret.index("^")
    assert quoted[col] == char, "the caret is under %r, expected %r:\n%s\n%s" % (
        quoted[col], char, quoted, caret)
print("ok: %d bytes" % len(data))
