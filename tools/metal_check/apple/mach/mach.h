// Stub for the Metal host type-check (see README).
#pragma once
#include <stdint.h>
typedef unsigned int mach_port_t;
typedef mach_port_t task_id_token_t;
typedef mach_port_t task_t;
typedef int kern_return_t;
typedef unsigned int natural_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
#define KERN_SUCCESS 0
