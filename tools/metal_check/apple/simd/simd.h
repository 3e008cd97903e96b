// Stub for the Metal host type-check (see README).
#pragma once
typedef float simd_float2 __attribute__((ext_vector_type(2)));
typedef float simd_float3 __attribute__((ext_vector_type(3)));
typedef float simd_float4 __attribute__((ext_vector_type(4)));
typedef struct {
  simd_float4 columns[4];
} simd_float4x4;
