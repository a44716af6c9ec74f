#include "agent/agent.h"

int main(int argc, char** argv) { return steward::AgentMain(argc, argv); }
