// run-artifact: examples/run_artifact.c in Swift over the relaxc runtime's C API (import
// RelaxcRuntime): loads a compiled model, gives every parameter of a function an f32 vector of N
// elements (0, 0.5, 1, ...), calls it on the Metal device and prints the result.
//   relaxc compile model.rx --target metal -o model.rxm && swift run run-artifact model.rxm main 7
import Foundation
import RelaxcRuntime

func fail(_ text: String, _ code: Int32 = 1) -> Never {
    FileHandle.standardError.write(("run-artifact: " + text + "\n").data(using: .utf8)!)
    exit(code)
}

func check(_ s: rx_status?) {
    guard let s = s else { return }
    let message = String(cString: rx_status_message(s))
    rx_status_free(s)
    fail(message)
}

let args = CommandLine.arguments
guard args.count == 4, let n = Int64(args[3]), n >= 0 else {
    fail("usage: run-artifact MODEL.rxm FUNCTION N", 2)
}
let spec = ProcessInfo.processInfo.environment["RX_DEVICE"] ?? "metal"
var device: OpaquePointer? = nil
check(rx_rt_device_open(spec, nil, &device))
var model: OpaquePointer? = nil
check(rx_rt_artifact_load(device, args[1], &model))

var fn = 0
while fn < rx_rt_artifact_function_count(model),
      String(cString: rx_rt_artifact_function_name(model, fn)) != args[2] {
    fn += 1
}
let paramCount = rx_rt_artifact_function_param_count(model, fn) // 0: no such function
var x = (0..<Int(n)).map { Float($0) * 0.5 }
var shape: [Int64] = [n]
var inputs = [OpaquePointer?](repeating: nil, count: paramCount)
for p in 0..<paramCount {
    var tensor: OpaquePointer? = nil
    check(rx_rt_tensor_from_host(device, RX_DTYPE_F32, 1, &shape, &x, &tensor))
    inputs[p] = tensor
}
var result: OpaquePointer? = nil
check(rx_rt_vm_call(model, args[2], inputs, paramCount, &result))
guard let out = rx_rt_value_tensor(result), rx_rt_tensor_dtype(out) == RX_DTYPE_F32 else {
    fail("\(args[2]) does not return an f32 tensor")
}
var y = [Float](repeating: 0, count: rx_rt_tensor_bytes(out) / MemoryLayout<Float>.size)
check(rx_rt_tensor_read(out, &y, rx_rt_tensor_bytes(out)))
print("\(args[2])(\(n)) on \(spec), relaxc \(String(cString: rx_version_string())):",
      y.map { String($0) }.joined(separator: " "))
for t in inputs { rx_rt_tensor_release(t) }
rx_rt_value_release(result)
rx_rt_artifact_release(model)
rx_rt_device_release(device)
