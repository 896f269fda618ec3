module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5xf32>, %arg1: tensor<2x2xf32>) -> (tensor<5xf32> {jax.result_info = "result[0]"}, tensor<2x2xf32> {jax.result_info = "result[1]"}, tensor<5xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.slice %arg0 [0:1] : (tensor<5xf32>) -> tensor<1xf32>
    %1 = stablehlo.reshape %0 : (tensor<1xf32>) -> tensor<f32>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %2 = stablehlo.compare GT, %1, %cst, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %3 = stablehlo.convert %2 : (tensor<i1>) -> tensor<i32>
    %4:2 = "stablehlo.case"(%3) ({
      %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %10 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<5xf32>
      %11 = stablehlo.subtract %arg0, %10 : tensor<5xf32>
      %12 = stablehlo.transpose %arg1, dims = [1, 0] : (tensor<2x2xf32>) -> tensor<2x2xf32>
      stablehlo.return %11, %12 : tensor<5xf32>, tensor<2x2xf32>
    }, {
      %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %10 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<5xf32>
      %11 = stablehlo.multiply %arg0, %10 : tensor<5xf32>
      %12 = stablehlo.dot_general %arg1, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      stablehlo.return %11, %12 : tensor<5xf32>, tensor<2x2xf32>
    }) : (tensor<i32>) -> (tensor<5xf32>, tensor<2x2xf32>)
    %5 = stablehlo.slice %arg0 [1:2] : (tensor<5xf32>) -> tensor<1xf32>
    %6 = stablehlo.reshape %5 : (tensor<1xf32>) -> tensor<f32>
    %cst_0 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %7 = stablehlo.compare GT, %6, %cst_0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %8 = stablehlo.convert %7 : (tensor<i1>) -> tensor<i32>
    %9 = "stablehlo.case"(%8) ({
      %10 = stablehlo.cosine %arg0 : tensor<5xf32>
      stablehlo.return %10 : tensor<5xf32>
    }, {
      %10 = stablehlo.sine %arg0 : tensor<5xf32>
      stablehlo.return %10 : tensor<5xf32>
    }) : (tensor<i32>) -> tensor<5xf32>
    return %4#0, %4#1, %9 : tensor<5xf32>, tensor<2x2xf32>, tensor<5xf32>
  }
}
