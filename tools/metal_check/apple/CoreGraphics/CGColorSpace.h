// Stub for the Metal host type-check (see README).
#pragma once
typedef struct CGColorSpace *CGColorSpaceRef;
