module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x16xbf16>) -> (tensor<4xbf16> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<"0xA139993D8CBD64BEE9BD7EBE763CAC3EFCBD1FBEFB3DB73DD83C6EBEF0BB323EACBEEABDF3BEA5BEECBE71BDA2BE8B3D213D3FBD21BF0ABE47BCE83CC4BEF5BD7BBE4FBE883E4FBE05BC623E15BEE5BCE23C833C9DBE9C3CAE3EC6BE5C3EF43C24BE003F433E9ABE993C143E41BD2F3E88BC2B3EB83E2DBE503DEDBD023D98BE14BE49BD663E933EA9BE4BBE263EFFBEEDBDC7BCA13E303EA8BDBDBD80BDC33EDBBD9BBDB53DF7BC4ABD8FBE3DBBE3BD953E273EC6BB2B3EAEBD873EB1BA153EA5BEB23DD8BE02BF9CBD66BE283D103F55BE20BE523DFC3D35BD53BD343E053E84BEA2BC113C87BE853D5CBE793E453DB73C17BEF3BC00BF91BEBA3D08BF593E"> : tensor<16x8xbf16>
    %0 = stablehlo.dot_general %arg0, %cst, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<4x8xbf16>
    %1 = stablehlo.multiply %0, %0 : tensor<4x8xbf16>
    %2 = stablehlo.multiply %1, %0 : tensor<4x8xbf16>
    %cst_0 = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<4x8xbf16>
    %4 = stablehlo.multiply %3, %2 : tensor<4x8xbf16>
    %5 = stablehlo.add %0, %4 : tensor<4x8xbf16>
    %cst_1 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<4x8xbf16>
    %7 = stablehlo.multiply %6, %5 : tensor<4x8xbf16>
    %8 = stablehlo.tanh %7 : tensor<4x8xbf16>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<bf16>) -> tensor<4x8xbf16>
    %10 = stablehlo.add %9, %8 : tensor<4x8xbf16>
    %cst_3 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %11 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<bf16>) -> tensor<4x8xbf16>
    %12 = stablehlo.multiply %11, %10 : tensor<4x8xbf16>
    %13 = stablehlo.multiply %0, %12 : tensor<4x8xbf16>
    %14 = stablehlo.convert %13 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.reduce(%14 init: %cst_4) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %16 = stablehlo.convert %15 : (tensor<4xf32>) -> tensor<4xbf16>
    return %16 : tensor<4xbf16>
  }
}
