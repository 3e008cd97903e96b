// Stub for the Metal host type-check (see README).
#pragma once
#include <stddef.h>
#include <stdint.h>
typedef struct objc_class *Class;
struct objc_object {
  Class isa;
};
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef id (*IMP)(id, SEL, ...);
typedef signed char BOOL;
#define YES ((BOOL)1)
#define NO ((BOOL)0)
#ifdef __cplusplus
class Protocol;
extern "C" {
#else
typedef struct objc_object Protocol;
#endif
id objc_lookUpClass(const char *name);
Class objc_getClass(const char *name);
Protocol *objc_getProtocol(const char *name);
SEL sel_registerName(const char *str);
const char *sel_getName(SEL sel);
BOOL class_respondsToSelector(Class cls, SEL sel);
Class object_getClass(id obj);
IMP class_getMethodImplementation(Class cls, SEL name);
BOOL class_addMethod(Class cls, SEL name, IMP imp, const char *types);
#ifdef __cplusplus
}
#endif
