// c[i] = m * a[i] + b[i] for i < n, with the symbolic values in a uniform buffer (std140) at
// binding 3 (the path for argument blocks larger than the push-constant bytes).
#version 450
layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(std140, set = 0, binding = 3) uniform Scalars { int m; int n; } s;
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < s.n) c[i] = float(s.m) * a[i] + b[i];
}
