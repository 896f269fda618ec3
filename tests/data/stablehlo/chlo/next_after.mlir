module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<41xf32>, %arg1: tensor<41xf32>, %arg2: tensor<41xf16>, %arg3: tensor<41xf16>, %arg4: tensor<41xbf16>, %arg5: tensor<41xbf16>) -> (tensor<41xf32> {jax.result_info = "result[0]"}, tensor<41xf16> {jax.result_info = "result[1]"}, tensor<41xbf16> {jax.result_info = "result[2]"}) {
    %0 = chlo.next_after %arg0, %arg1 : tensor<41xf32>, tensor<41xf32> -> tensor<41xf32>
    %1 = chlo.next_after %arg2, %arg3 : tensor<41xf16>, tensor<41xf16> -> tensor<41xf16>
    %2 = chlo.next_after %arg4, %arg5 : tensor<41xbf16>, tensor<41xbf16> -> tensor<41xbf16>
    return %0, %1, %2 : tensor<41xf32>, tensor<41xf16>, tensor<41xbf16>
  }
}
