// Stub for the Metal host type-check (see README).
#pragma once
#include <stddef.h>
#include <stdint.h>
typedef struct dispatch_queue_s *dispatch_queue_t;
typedef struct dispatch_data_s *dispatch_data_t;
typedef struct dispatch_semaphore_s *dispatch_semaphore_t;
typedef struct dispatch_group_s *dispatch_group_t;
typedef uint64_t dispatch_time_t;
typedef void (*dispatch_function_t)(void *);
#define DISPATCH_TIME_NOW (0ull)
#define DISPATCH_TIME_FOREVER (~0ull)
#ifdef __cplusplus
extern "C" {
#endif
dispatch_semaphore_t dispatch_semaphore_create(long value);
long dispatch_semaphore_wait(dispatch_semaphore_t dsema, dispatch_time_t timeout);
long dispatch_semaphore_signal(dispatch_semaphore_t dsema);
void dispatch_release(void *object);
#ifdef __cplusplus
}
#endif
