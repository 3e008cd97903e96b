// Stub for the Metal host type-check (see README).
#pragma once
typedef struct __IOSurface *IOSurfaceRef;
