module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<[[0.372332633, 0.62808454, -9.027250e-01, -0.0487780161, 0.358403951, 0.478054345, 0.231149107, 0.529311121], [0.102515489, 0.194902375, 0.0631933138, -0.379666388, -0.299328536, 0.1342033, -0.205129981, 0.449561298], [0.456927687, 6.359670e-01, -0.00921849347, 0.489215285, -0.320263922, -0.288610846, 0.0287449695, 0.0995008274], [-0.565327704, -0.611903429, 0.125539169, -0.304829538, 0.427218735, 0.139493152, 0.10860616, 7.369560e-02], [0.316598266, -0.0541099831, 0.383828521, -0.18593879, -7.954870e-02, -0.240594923, 0.21130538, 0.0126869967], [-0.304857463, 0.70777142, -0.128592327, -0.0411181785, 0.139358297, 0.617887914, -0.0524615347, 0.248612821], [0.0349294282, -0.51752919, 0.28000626, 0.360850483, -0.0848479568, -0.00545756938, -0.530795455, -0.538444817], [-0.138423204, 0.221300855, -0.166019693, 0.103245683, 0.342157423, 0.0338571183, 0.203105241, 0.511900604]]> : tensor<8x8xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0:4 = stablehlo.while(%iterArg = %cst, %iterArg_1 = %c_0, %iterArg_2 = %c, %iterArg_3 = %arg0) : tensor<8x8xf32>, tensor<i32>, tensor<i32>, tensor<2x8xf32>
    cond {
      %c_4 = stablehlo.constant dense<4> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg_1, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1:2 = func.call @closed_call(%iterArg, %iterArg_2, %iterArg_3) : (tensor<8x8xf32>, tensor<i32>, tensor<2x8xf32>) -> (tensor<i32>, tensor<2x8xf32>)
      %c_4 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg_1, %c_4 : tensor<i32>
      stablehlo.return %iterArg, %2, %1#0, %1#1 : tensor<8x8xf32>, tensor<i32>, tensor<i32>, tensor<2x8xf32>
    }
    return %0#3 : tensor<2x8xf32>
  }
  func.func private @closed_call(%arg0: tensor<8x8xf32>, %arg1: tensor<i32>, %arg2: tensor<2x8xf32>) -> (tensor<i32>, tensor<2x8xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg1, %c : tensor<i32>
    %1 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %2 = stablehlo.tanh %1 : tensor<2x8xf32>
    %3 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %cst = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %4 = stablehlo.multiply %3, %cst : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
    %6 = stablehlo.add %2, %5 : tensor<2x8xf32>
    return %0, %6 : tensor<i32>, tensor<2x8xf32>
  }
}
