// Stub for the Metal host type-check (see README).
#pragma once
typedef double CGFloat;
typedef struct {
  CGFloat width, height;
} CGSize;
typedef struct {
  CGFloat x, y;
} CGPoint;
typedef struct {
  CGPoint origin;
  CGSize size;
} CGRect;
