module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<59xf32>) -> (tensor<59xf32> {jax.result_info = "result[0]"}, tensor<59xf32> {jax.result_info = "result[1]"}) {
    %0 = chlo.erfc %arg0 : tensor<59xf32> -> tensor<59xf32>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<59xf32>
    %2 = stablehlo.multiply %1, %arg0 : tensor<59xf32>
    %3 = stablehlo.negate %arg0 : tensor<59xf32>
    %cst_0 = stablehlo.constant dense<0.707106769> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<59xf32>
    %5 = stablehlo.multiply %3, %4 : tensor<59xf32>
    %6 = chlo.erfc %5 : tensor<59xf32> -> tensor<59xf32>
    %7 = stablehlo.multiply %2, %6 : tensor<59xf32>
    return %0, %7 : tensor<59xf32>, tensor<59xf32>
  }
}
