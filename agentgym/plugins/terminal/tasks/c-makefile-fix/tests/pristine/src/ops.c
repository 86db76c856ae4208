#include <math.h>
#include <string.h>

#include "calc.h"

int apply(const char *op, double a, double b, double *out) {
    if (strcmp(op, "add") == 0) {
        *out = a + b;
    } else if (strcmp(op, "sub") == 0) {
        *out = a - b;
    } else if (strcmp(op, "mul") == 0) {
        *out = a * b;
    } else if (strcmp(op, "div") == 0) {
        *out = a / b;
    } else if (strcmp(op, "pow") == 0) {
        *out = pow(a, b);
    } else if (strcmp(op, "hyp") == 0) {
        *out = hypot(a, b);
    } else {
        return -1;
    }
    return 0;
}
