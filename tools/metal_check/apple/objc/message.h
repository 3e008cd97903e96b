// Stub for the Metal host type-check (see README).
#pragma once
#include <objc/runtime.h>
#ifdef __cplusplus
extern "C" {
#endif
void objc_msgSend(void);
void objc_msgSend_stret(void);
void objc_msgSend_fpret(void);
#ifdef __cplusplus
}
#endif
