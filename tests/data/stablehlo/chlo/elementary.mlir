module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<37xf32>, %arg1: tensor<43xf32>, %arg2: tensor<37xf32>) -> (tensor<37xf32> {jax.result_info = "result[0]"}, tensor<37xf32> {jax.result_info = "result[1]"}, tensor<43xf32> {jax.result_info = "result[2]"}, tensor<43xf32> {jax.result_info = "result[3]"}, tensor<43xf32> {jax.result_info = "result[4]"}, tensor<43xf32> {jax.result_info = "result[5]"}, tensor<37xf32> {jax.result_info = "result[6]"}, tensor<37xf32> {jax.result_info = "result[7]"}, tensor<43xf32> {jax.result_info = "result[8]"}) {
    %0 = chlo.asin %arg0 : tensor<37xf32> -> tensor<37xf32>
    %1 = chlo.acos %arg0 : tensor<37xf32> -> tensor<37xf32>
    %2 = chlo.atan %arg1 : tensor<43xf32> -> tensor<43xf32>
    %3 = chlo.sinh %arg1 : tensor<43xf32> -> tensor<43xf32>
    %4 = chlo.cosh %arg1 : tensor<43xf32> -> tensor<43xf32>
    %5 = chlo.asinh %arg1 : tensor<43xf32> -> tensor<43xf32>
    %6 = call @arccosh(%arg2) : (tensor<37xf32>) -> tensor<37xf32>
    %7 = chlo.atanh %arg0 : tensor<37xf32> -> tensor<37xf32>
    %8 = chlo.square %arg1 : tensor<43xf32> -> tensor<43xf32>
    return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<37xf32>, tensor<37xf32>, tensor<43xf32>, tensor<43xf32>, tensor<43xf32>, tensor<43xf32>, tensor<37xf32>, tensor<37xf32>, tensor<43xf32>
  }
  func.func private @arccosh(%arg0: tensor<37xf32>) -> tensor<37xf32> {
    %0 = chlo.acosh %arg0 : tensor<37xf32> -> tensor<37xf32>
    return %0 : tensor<37xf32>
  }
}
