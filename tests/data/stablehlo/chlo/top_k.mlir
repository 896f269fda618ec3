module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x9xf32>) -> (tensor<4x3xf32> {jax.result_info = "result[0]"}, tensor<4x3xi32> {jax.result_info = "result[1]"}, tensor<4x2xi32> {jax.result_info = "result[2]"}) {
    %values, %indices = chlo.top_k(%arg0, k = 3) : tensor<4x9xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)
    %0 = stablehlo.negate %arg0 : tensor<4x9xf32>
    %1 = call @argpartition(%0) : (tensor<4x9xf32>) -> tensor<4x9xi32>
    %2 = stablehlo.slice %1 [0:4, 0:2] : (tensor<4x9xi32>) -> tensor<4x2xi32>
    return %values, %indices, %2 : tensor<4x3xf32>, tensor<4x3xi32>, tensor<4x2xi32>
  }
  func.func private @argpartition(%arg0: tensor<4x9xf32>) -> tensor<4x9xi32> {
    %0 = stablehlo.negate %arg0 : tensor<4x9xf32>
    %values, %indices = chlo.top_k(%0, k = 3) : tensor<4x9xf32> -> (tensor<4x3xf32>, tensor<4x3xi32>)
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x9xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<4x3xi32>
    %3 = stablehlo.compare LT, %indices, %2, SIGNED : (tensor<4x3xi32>, tensor<4x3xi32>) -> tensor<4x3xi1>
    %c_0 = stablehlo.constant dense<9> : tensor<i32>
    %4 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<4x3xi32>
    %5 = stablehlo.add %indices, %4 : tensor<4x3xi32>
    %6 = stablehlo.select %3, %5, %indices : tensor<4x3xi1>, tensor<4x3xi32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<4x3xi32>) -> tensor<4x3x1xi32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
    %10 = "stablehlo.scatter"(%1, %7, %9) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 2>, unique_indices = false}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      stablehlo.return %arg2 : tensor<f32>
    }) : (tensor<4x9xf32>, tensor<4x3x1xi32>, tensor<4x3xf32>) -> tensor<4x9xf32>
    %values_2, %indices_3 = chlo.top_k(%10, k = 6) : tensor<4x9xf32> -> (tensor<4x6xf32>, tensor<4x6xi32>)
    %11 = stablehlo.concatenate %indices, %indices_3, dim = 1 : (tensor<4x3xi32>, tensor<4x6xi32>) -> tensor<4x9xi32>
    return %11 : tensor<4x9xi32>
  }
}
