import sys; sys.path.insert(0, sys.argv[1]); from tau2.domains.retail.tools import RetailTools; print("ok")
