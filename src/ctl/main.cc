#include "ctl/ctl.h"

int main(int argc, char** argv) { return steward::CtlMain(argc, argv); }
