// Stub for the Metal host type-check (see README).
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
typedef long CFIndex;
typedef unsigned long CFOptionFlags;
typedef unsigned long CFHashCode;
typedef double CFTimeInterval;
typedef const void *CFTypeRef;
typedef const struct __CFString *CFStringRef;
typedef struct __CFString *CFMutableStringRef;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef const struct __CFDictionary *CFDictionaryRef;
typedef const struct __CFArray *CFArrayRef;
typedef const struct __CFURL *CFURLRef;
typedef const struct __CFData *CFDataRef;
typedef const struct __CFError *CFErrorRef;
typedef const struct __CFNumber *CFNumberRef;
typedef struct __CFRunLoop *CFRunLoopRef;
typedef uint32_t CFStringEncoding;
typedef uint32_t UInt32;
typedef int32_t SInt32;
typedef uint64_t UInt64;
typedef uint16_t UniChar;
typedef unsigned char Boolean;
typedef struct {
  CFIndex location;
  CFIndex length;
} CFRange;
typedef enum { kCFCompareLessThan = -1, kCFCompareEqualTo = 0, kCFCompareGreaterThan = 1 } CFComparisonResult;
#ifdef __cplusplus
extern "C" {
#endif
CFTypeRef CFRetain(CFTypeRef cf);
void CFRelease(CFTypeRef cf);
#ifdef __cplusplus
}
#endif
#define CF_ENUM(type, name) type name; enum : type
#define CF_OPTIONS(type, name) type name; enum : type
