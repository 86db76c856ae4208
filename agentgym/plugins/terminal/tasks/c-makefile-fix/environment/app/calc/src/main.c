#include <stdio.h>

#include "calc.h"

int main(int argc, char **argv) {
    double a, b, result;
    if (argc != 4) {
        fprintf(stderr, "usage: calc OP A B\n");
        return 2;
    }
    if (parse_number(argv[2], &a) != 0 || parse_number(argv[3], &b) != 0) {
        fprintf(stderr, "calc: not a number\n");
        return 2;
    }
    if (apply(argv[1], a, b, &result) != 0) {
        fprintf(stderr, "calc: unknown operation '%s'\n", argv[1]);
        return 2;
    }
    printf("%g\n", result);
    return 0;
}
