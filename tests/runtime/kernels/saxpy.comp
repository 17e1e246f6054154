// c[i] = 2 * a[i] + b[i] for i < n. Push constants: the symbolic value n (docs/kernel-abi.md).
#version 450
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant, std430) uniform Scalars { int n; } s;
void main() {
  int i = int(gl_GlobalInvocationID.x);
  if (i < s.n) c[i] = 2.0 * a[i] + b[i];
}
