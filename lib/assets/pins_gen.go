// Code generated from ../shared/tau2-data (files byte-identical to the upstream git blobs of
// sierra-research/tau2-bench, see docs/ASSETS.md); DO NOT EDIT by hand.

package assets

// tau2HeadFiles are the files of tau2-bench data/ at commit a2c0247 the τ² port reads, with their sha256.
var tau2HeadFiles = []File{
	{Path: "tau2/domains/airline/db.json", SHA256: "1af9fea6e03ca7ca15a22bb3fcaf3e351393e3fc9070b6777947da8996f7531b", Size: 7042725},
	{Path: "tau2/domains/airline/policy.md", SHA256: "10dc0525421521208be39cee235bba84a16e2bcba9899eb93d92cd81d2f62fc4", Size: 7676},
	{Path: "tau2/domains/airline/split_tasks.json", SHA256: "b22ced4d9a9850ac9aea31c53bdcb6d6009058140bd9acc7db37c1d36222ba8b", Size: 1443},
	{Path: "tau2/domains/airline/tasks.json", SHA256: "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052", Size: 155528},
	{Path: "tau2/domains/mock/db.json", SHA256: "8661f80b4c693bb15ef2fe6781d24a5765240d61fc74387c770133953f9113ea", Size: 281},
	{Path: "tau2/domains/mock/policy.md", SHA256: "50ccbefac7c9ba77ce54131d61cfc6882f74b88ace66771115f9d867ec098203", Size: 278},
	{Path: "tau2/domains/mock/policy_solo.md", SHA256: "2608375977bdeedd9cf34ab437b213403c8e97e9929d5094338355a994ac0c86", Size: 224},
	{Path: "tau2/domains/mock/split_tasks.json", SHA256: "613c3298e6fd3cf03f71f848ecee519068eb4df54a1ceb28596f5aa443ee6581", Size: 416},
	{Path: "tau2/domains/mock/tasks.json", SHA256: "0d8bcd14798bf2e6e082432147f62570c57b0897b4e4e388c95bb02ecbe5d8cf", Size: 14134},
	{Path: "tau2/domains/mock/user_db.json", SHA256: "78d424b5177e430b7f483787a956ad3a6a0880e8e5b312be8e373b15c876d51f", Size: 203},
	{Path: "tau2/domains/retail/db.json", SHA256: "413a65160adbdb5fde0ffc0015c49b6d70250b10c18128de169b597af7766765", Size: 2811616},
	{Path: "tau2/domains/retail/policy.md", SHA256: "2c9652afbce57d6e087768d37cda64d31c53d50b3e3225cfdb791bac66466467", Size: 6699},
	{Path: "tau2/domains/retail/split_tasks.json", SHA256: "ed0580ec52575b63fbf76568af42490da6ee7783ecb4aa81af46961291358f20", Size: 3263},
	{Path: "tau2/domains/retail/tasks.json", SHA256: "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8", Size: 345982},
	{Path: "tau2/domains/telecom/db.toml", SHA256: "562d647ef9d7df8df91eafd8ee76036e707c8f9e32aaedc4a7fde06975aea2c0", Size: 9628},
	{Path: "tau2/domains/telecom/main_policy.md", SHA256: "95943844a0cf11fdf0e2842b483b81d9f9338aa53235712ed131db075d086ed7", Size: 5699},
	{Path: "tau2/domains/telecom/main_policy_solo.md", SHA256: "781296ae5419169cb64aac0c4fa2aa6129c78f3c1592f64abd80df6fbabb7042", Size: 5200},
	{Path: "tau2/domains/telecom/split_tasks.json", SHA256: "605b488bb9a6acb3c7f4505240a855fdc8681d09aadb16a8f38b2efcfc5c3aec", Size: 356149},
	{Path: "tau2/domains/telecom/tasks.json", SHA256: "37e562e1ae3242577407e1303b1548bc64e7ea68e37d36173e6747990ceaf8a4", Size: 13977063},
	{Path: "tau2/domains/telecom/tasks_small.json", SHA256: "c8ea6f75adc18a8ad363974292cbd26b6e8b0e348ec87d265a4188e0088a8f24", Size: 83833},
	{Path: "tau2/domains/telecom/tech_support_manual.md", SHA256: "015a3ee49ec8c199c5e1a059c922081937b92cf3a5ea74fedbc4357816f389ba", Size: 17589},
	{Path: "tau2/domains/telecom/tech_support_workflow.md", SHA256: "64f3ccd13875d14f358b21b9af221dab09e0e7bf5690d0e4322fb91855a43a4d", Size: 16390},
	{Path: "tau2/domains/telecom/tech_support_workflow_solo.md", SHA256: "b174d1f9705b5d7df49468daf99560a5633f86d23e10499a1166a7753706a412", Size: 15470},
	{Path: "tau2/domains/telecom/user_db.toml", SHA256: "4886107ea0c16f8e16d74bef91cfb557de61822afe9361f5a9b241806aea2e4c", Size: 933},
	{Path: "tau2/user_simulator/simulation_guidelines.md", SHA256: "740a29dfa64d7bc08eea3bf7493575b914a63f744acbaf7f199ee07eddaf72d3", Size: 1449},
	{Path: "tau2/user_simulator/simulation_guidelines_tools.md", SHA256: "cbf3d8a4d8642fd04e559862f1afef55d7dd4e6a7e727ca49e239023c599de0c", Size: 2747},
}

// tau2V021Files are the task files of tau2-bench data/ at v0.2.1 (commit 0ed2fd8), with their sha256.
var tau2V021Files = []File{
	{Path: "tau2/domains/airline/tasks.json", SHA256: "40d692b3fca780f46b56d48b447fd8db79a653f216667b8ed7c1a88380544532", Size: 149096},
	{Path: "tau2/domains/mock/db.json", SHA256: "8661f80b4c693bb15ef2fe6781d24a5765240d61fc74387c770133953f9113ea", Size: 281},
	{Path: "tau2/domains/mock/policy.md", SHA256: "50ccbefac7c9ba77ce54131d61cfc6882f74b88ace66771115f9d867ec098203", Size: 278},
	{Path: "tau2/domains/mock/policy_solo.md", SHA256: "2608375977bdeedd9cf34ab437b213403c8e97e9929d5094338355a994ac0c86", Size: 224},
	{Path: "tau2/domains/mock/split_tasks.json", SHA256: "893d6a7c5746e90fc9f1db635d69df78d7946721f21d44c1b6c337beade28636", Size: 377},
	{Path: "tau2/domains/mock/tasks.json", SHA256: "d1350db27317bc57e9925837bf36ff87504f8562a7fb8cb22d7a94c72bf7679f", Size: 12092},
	{Path: "tau2/domains/retail/tasks.json", SHA256: "76e1fa649a359bef2d2fd30eae834b99d261d84e2e5d364856f6632fdf778dfd", Size: 328166},
}
