module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<40xf64>, %arg1: tensor<36xf64>, %arg2: tensor<37xf64>, %arg3: tensor<22xf64>, %arg4: tensor<22xf64>) -> (tensor<40xf64> {jax.result_info = "result[0]"}, tensor<40xf64> {jax.result_info = "result[1]"}, tensor<36xf64> {jax.result_info = "result[2]"}, tensor<37xf64> {jax.result_info = "result[3]"}, tensor<37xf64> {jax.result_info = "result[4]"}, tensor<22xf64> {jax.result_info = "result[5]"}) {
    %0 = chlo.erfc %arg0 : tensor<40xf64> -> tensor<40xf64>
    %1 = chlo.bessel_i1e %arg0 : tensor<40xf64> -> tensor<40xf64>
    %2 = chlo.erf_inv %arg1 : tensor<36xf64> -> tensor<36xf64>
    %3 = chlo.lgamma %arg2 : tensor<37xf64> -> tensor<37xf64>
    %4 = chlo.digamma %arg2 : tensor<37xf64> -> tensor<37xf64>
    %5 = chlo.zeta %arg3, %arg4 : tensor<22xf64>, tensor<22xf64> -> tensor<22xf64>
    return %0, %1, %2, %3, %4, %5 : tensor<40xf64>, tensor<40xf64>, tensor<36xf64>, tensor<37xf64>, tensor<37xf64>, tensor<22xf64>
  }
}
