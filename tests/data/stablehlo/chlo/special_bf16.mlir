module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<38xbf16>, %arg1: tensor<24xbf16>) -> (tensor<38xbf16> {jax.result_info = "result[0]"}, tensor<38xbf16> {jax.result_info = "result[1]"}, tensor<38xbf16> {jax.result_info = "result[2]"}, tensor<38xbf16> {jax.result_info = "result[3]"}, tensor<24xbf16> {jax.result_info = "result[4]"}) {
    %0 = chlo.erfc %arg0 : tensor<38xbf16> -> tensor<38xbf16>
    %1 = chlo.lgamma %arg0 : tensor<38xbf16> -> tensor<38xbf16>
    %2 = chlo.digamma %arg0 : tensor<38xbf16> -> tensor<38xbf16>
    %3 = chlo.sinh %arg0 : tensor<38xbf16> -> tensor<38xbf16>
    %4 = chlo.erf_inv %arg1 : tensor<24xbf16> -> tensor<24xbf16>
    return %0, %1, %2, %3, %4 : tensor<38xbf16>, tensor<38xbf16>, tensor<38xbf16>, tensor<38xbf16>, tensor<24xbf16>
  }
}
