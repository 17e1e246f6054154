// x[i] = 2 * x[i] + k for i < n: in place, so consecutive launches depend on each other.
#version 450
layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer X { int x[]; };
layout(push_constant, std430) uniform Scalars { int k; int n; } s;
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < s.n) x[i] = 2 * x[i] + s.k;
}
