// swift-tools-version:5.9
// examples/apple: the relaxc runtime with its Metal backend as a Swift package. The runtime comes
// as RelaxcRuntime.xcframework (static libraries for macOS, iOS and the iOS simulator), which
// ./build-xcframework.sh builds on a Mac with Xcode; `import RelaxcRuntime` (include/module.modulemap)
// gives Swift the C API of relaxc/runtime.h. docs/mobile.md has the recipe.
//   ./build-xcframework.sh && swift run run-artifact model.rxm main 7
import PackageDescription

let package = Package(
    name: "RelaxcRuntime",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "RelaxcRuntime", targets: ["RelaxcRuntime"]),
        .executable(name: "run-artifact", targets: ["RunArtifact"]),
    ],
    targets: [
        .binaryTarget(name: "RelaxcRuntime", path: "RelaxcRuntime.xcframework"),
        .executableTarget(
            name: "RunArtifact",
            dependencies: ["RelaxcRuntime"],
            path: "Sources/RunArtifact",
            linkerSettings: [
                .linkedFramework("Metal"), .linkedFramework("Foundation"), .linkedLibrary("objc"),
            ]
        ),
    ]
)
